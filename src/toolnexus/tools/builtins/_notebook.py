"""``notebook_edit``: replace, insert or delete one cell of a Jupyter notebook (via nbformat)."""

from __future__ import annotations

from typing import Annotated, Literal

import nbformat
from pydantic import Field

from toolnexus.tools._decorator import tool
from toolnexus.tools._tool import Tool
from toolnexus.tools.builtins._files import WRITES
from toolnexus.tools.builtins._root import Root

__all__ = ["notebook_tool"]


def notebook_tool(root: Root) -> Tool:
    """``notebook_edit`` working under ``root``."""

    @tool(name="notebook_edit", hints=WRITES)
    def notebook_edit(
        path: str,
        cell_index: Annotated[int, Field(ge=0)],
        new_source: str = "",
        cell_type: Literal["code", "markdown"] | None = None,
        edit_mode: Literal["replace", "insert", "delete"] = "replace",
    ) -> str:
        """Replace, insert or delete one cell of a Jupyter notebook (.ipynb).

        Args:
            path: The notebook, relative to the working directory.
            cell_index: The cell (0-based); for insert, the new cell's position.
            new_source: The cell's new source (replace, insert).
            cell_type: "code" or "markdown"; required for insert, optional for replace.
            edit_mode: "replace", "insert" or "delete".
        """
        target = root.resolve(path)
        if target.suffix != ".ipynb":
            raise ValueError(f"{path} is not a notebook (.ipynb); use edit for other files")
        if not target.is_file():
            raise FileNotFoundError(f"no notebook {path}")
        notebook = nbformat.read(str(target), as_version=4)
        cells = notebook.cells
        limit = len(cells) if edit_mode == "insert" else len(cells) - 1
        if cell_index > limit:
            raise IndexError(
                f"{path} has {len(cells)} cells; cell_index {cell_index} is out of range"
            )
        if edit_mode == "delete":
            del cells[cell_index]
            done = f"deleted cell {cell_index}"
        elif edit_mode == "insert":
            if cell_type is None:
                raise ValueError("insert needs cell_type ('code' or 'markdown')")
            maker = (
                nbformat.v4.new_code_cell if cell_type == "code" else nbformat.v4.new_markdown_cell
            )
            cells.insert(cell_index, maker(new_source))
            done = f"inserted a {cell_type} cell at {cell_index}"
        else:
            cell = cells[cell_index]
            if cell_type is not None and cell_type != cell.cell_type:
                maker = (
                    nbformat.v4.new_code_cell
                    if cell_type == "code"
                    else nbformat.v4.new_markdown_cell
                )
                cells[cell_index] = maker(new_source)
            else:
                cell.source = new_source
                if cell.cell_type == "code":  # old outputs no longer describe the new source
                    cell.outputs = []
                    cell.execution_count = None
            done = f"replaced cell {cell_index}"
        nbformat.write(notebook, str(target))
        return f"{done} of {root.show(target)} (now {len(cells)} cells)"

    return notebook_edit
