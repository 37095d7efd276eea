"""Where `export -o` writes (syno_automl.export): a path in a missing folder is a SynoError naming the folder, not
[Errno 2]; a folder is refused; a good path is written."""
from __future__ import annotations

import re
from pathlib import Path

import pytest

from syno_automl.errors import OutputPathError


def test_an_export_path_in_a_missing_folder_names_the_folder(tmp_path: Path) -> None:
    from syno_automl.export import check_output_path, write_output

    target = tmp_path / "no" / "such" / "op.py"
    with pytest.raises(OutputPathError, match=re.escape(f"the folder '{target.parent}' does not exist")) as info:
        write_output(target, "x = 1\n")
    assert isinstance(info.value, FileNotFoundError)
    with pytest.raises(OutputPathError, match="it is a folder"):
        check_output_path(tmp_path)
    assert write_output(tmp_path / "op.py", "x = 1\n").read_text() == "x = 1\n"
