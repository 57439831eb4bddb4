"""The invocation a toy product shares with every product (`runs/command.Invocation`'s
own part), for the tests that build a product of their own around the command skeleton:
an input file, a local DIR, and the file's name as the input's."""

from __future__ import annotations

import dataclasses
from pathlib import Path

from batchval._internal.place.place import Place


@dataclasses.dataclass
class OnDisk:
    """A product's input file and its local DIR."""

    input_path: Path
    out_dir: Path

    @property
    def place(self) -> Place:
        return Place(self.out_dir)

    @property
    def input_name(self) -> str:
        return str(self.input_path)
