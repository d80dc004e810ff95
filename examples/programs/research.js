// The same program in JavaScript (needs the v8 extra: pip install 'toolnexus[v8]').
const names = await tools.search_docs({ query: "lane sandbox audit program" });
console.log("found:", names.join(", "));
const texts = await Promise.all(names.map((name) => tools.read_doc({ name })));
const saved = await tools.save_note({ text: texts.map((t) => t.split(";")[0]).join(" ") });
return { read: texts.length, note: saved };
