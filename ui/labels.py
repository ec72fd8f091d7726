"""Class labels for the try panel: the labels files a model's config names (Triton's ``label_filename``), read
from the repository the page was given."""

from __future__ import annotations

from pathlib import Path


def read_labels(repository: Path | None, name: str, config: dict) -> dict[str, list[str]] | None:
    """``{output: labels}`` for the outputs of ``name`` whose config names a labels file; None when there are none.
    ``name`` must come from the server's index: it is joined to the repository path."""
    if repository is None:
        return None
    from orinkit.repo.steps import label_lines

    folder = Path(repository) / name
    labels = {}
    for output in config.get("output", []):
        filename = output.get("label_filename", "")
        # The config comes from the server, but a name with a folder in it reads nothing outside the model folder.
        if not filename or Path(filename).name != filename or filename in (".", ".."):
            continue
        path = folder / filename
        if path.is_file():
            labels[output["name"]] = label_lines(path)
    return labels or None
