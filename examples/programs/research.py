# The kind of program a model writes in Code Mode: search, read every hit at once, save a note.
import asyncio

names = await tools.search_docs({"query": "lane sandbox audit program"})
print("found:", ", ".join(names))
texts = await asyncio.gather(*[tools.read_doc({"name": n}) for n in names])
summary = " ".join(t.split(";")[0] for t in texts)
saved = await tools.save_note({"text": summary})
{"read": len(texts), "note": saved}
