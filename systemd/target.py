"""The system a unit is installed on, seen from this machine: the running system itself, or an image tree (``--root
DIR``) whose paths the unit names without DIR (``/opt/models`` is ``DIR/opt/models`` here).

Paths given for the target are looked up where they will be: under the root. A relative root is made absolute
first, so that nothing relative reaches the unit.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from orinkit.systemd.errors import UnitOptionError


@dataclass(frozen=True)
class Target:
    root: Path | None = None  # absolute; None: the running system

    @classmethod
    def of(cls, root: str | os.PathLike[str] | None) -> Target:
        # Resolved as the server's options resolve their paths, so that prefixes compare equal.
        return cls(None if root is None else Path(root).expanduser().resolve())

    @property
    def base(self) -> Path:
        return self.root if self.root is not None else Path("/")

    def _inside(self, path: Path) -> bool:
        return self.root is not None and (path == self.root or self.root in path.parents)

    def here(self, path: str | os.PathLike[str], *, what: str) -> Path:
        """Where ``path``, a path on the target, lies on this machine. With a root it may also be given as the
        path under the root (``DIR/opt/models``); a relative path outside the root names nothing on the target."""
        given = Path(path).expanduser()
        if self.root is None:
            return given
        absolute = Path(os.path.abspath(given))
        if self._inside(absolute):
            return absolute
        if not given.is_absolute():
            raise UnitOptionError(f"{what} '{path}' is relative and outside the image tree {self.root}",
                                  hint=f"give the path it has on the target (e.g. {what} /opt/models), or its "
                                       f"place under {self.root}")
        return self.root / given.relative_to("/")

    def there(self, path: str | os.PathLike[str]) -> Path:
        """The path on the target of ``path`` on this machine (under the root: without it)."""
        absolute = Path(os.path.abspath(path))
        if self._inside(absolute):
            return Path("/") / absolute.relative_to(self.root)
        return absolute
