"""The search caches' folder beside a SQLite file (``<database>.memlane-cache/``), kept
tidy: what an erasure may have left in it removed, and at open the temporary files of dead
writers and the folder of the project's former name. Not part of the public API.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Sequence
from pathlib import Path

from ..ranking.snapshot_files import partition_digest, remove_temporary

__all__ = ["CacheFiles", "remove_folder"]

log = logging.getLogger("memlane.store")


class CacheFiles:
    """The snapshot folder of the SQLite file at ``path``."""

    def __init__(self, path: Path) -> None:
        self.folder = Path(str(path) + ".memlane-cache")
        #: where versions before the rename to memlane kept them
        self.legacy_folder = Path(str(path) + ".asm-cache")

    def remove_for_erasure(self, partitions: Sequence[str]) -> list[str]:
        """Remove the search caches' files an erasure of ``partitions`` may have left: every
        keyword snapshot (all are stale once the generation moved; earlier versions saved
        every stem their process had seen in each), every snapshot of ``partitions``,
        every temporary file of a write (a killed one's partial snapshot; a live one's fails),
        and the folder of the project's former name. Returns what could not be removed."""
        folder = self.folder
        digests = {partition_digest(partition) for partition in partitions}
        failed = remove_temporary(folder, every=True)
        try:
            entries = list(os.scandir(folder))
        except FileNotFoundError:
            entries = []
        except OSError as exc:
            entries = []
            failed.append(f"{folder} ({exc.strerror or exc})")
        for entry in entries:
            kind, _, rest = entry.name.partition("-")
            if kind == "keywords" or rest.split(".")[0] in digests:
                try:
                    os.unlink(entry.path)
                except FileNotFoundError:
                    pass
                except OSError as exc:
                    failed.append(f"{entry.path} ({exc.strerror or exc})")
        failed += remove_folder(self.legacy_folder)
        if not failed:
            return []
        return [
            f"search cache files that may hold erased words could not be removed: "
            f"{'; '.join(failed)}. Delete them (the folder {str(folder)!r} is a cache: "
            "nothing is lost), then erase the user again"
        ]

    def tidy(self) -> None:
        """At open: the temporary files of snapshot writes whose writer is gone, and the
        folder of the project's former name (``<database>.asm-cache/``: derived data that
        may hold words erased since), removed. Best effort."""
        failed = remove_temporary(self.folder)
        failed += remove_folder(self.legacy_folder)
        if failed:
            log.info("search cache files not removed: %s", "; ".join(failed))


def remove_folder(folder: Path) -> list[str]:
    """Remove ``folder`` and everything in it, if it exists; what could not be removed."""
    failed: list[str] = []
    if not folder.is_dir() or folder.is_symlink():
        return failed
    for root, folders, files in os.walk(folder, topdown=False):
        for name, remove in [*((f, os.unlink) for f in files), *((d, os.rmdir) for d in folders)]:
            try:
                remove(os.path.join(root, name))
            except FileNotFoundError:
                pass
            except OSError as exc:
                failed.append(f"{os.path.join(root, name)} ({exc.strerror or exc})")
    try:
        folder.rmdir()
    except FileNotFoundError:
        pass
    except OSError as exc:
        if not failed:
            failed.append(f"{folder} ({exc.strerror or exc})")
    return failed
