"""Files that appear whole or not at all."""

import contextlib
import os
import tempfile


@contextlib.contextmanager
def atomic_write(path, mode="w", encoding=None):
    """Write `path` through a private temporary file next to it (never a planted file followed by
    name), renamed to `path` when the block ends and removed when it fails: a reader, or a full
    disk, never leaves a half-written file under `path`."""
    directory, name = os.path.split(path)
    fd, tmp = tempfile.mkstemp(dir=directory or ".", prefix="." + name + ".")
    try:
        with os.fdopen(fd, mode, encoding=encoding) as f:
            yield f
        os.chmod(tmp, 0o644)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.remove(tmp)
        raise
