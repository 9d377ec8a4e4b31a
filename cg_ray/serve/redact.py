"""What of a failure a client may see: the reason, never a server path or a stack trace (those are logged)."""

from __future__ import annotations

import re

from cg_ray.errors import CgRayError, InputError

# Two or more absolute path segments: /tmp/tmpab12/run, /srv/data/analyses/ana_x/summary.json
_PATH = re.compile(r"(?<![\w.])(?:[A-Za-z]:)?(?:[/\\][^\s/\\'\"(),:;]+){2,}[/\\]?")
MAX_CHARS = 2000


def scrub_paths(text: str) -> str:
    """`text` with every absolute path replaced by `<server path>`."""
    return _PATH.sub("<server path>", text)


def public_error(exc: BaseException, reference: str) -> str:
    """The message a client gets for an analysis that failed with `exc`; `reference` (an id) finds the log."""
    if isinstance(exc, InputError):  # the reason, line and field; the file is a server path
        message = str(InputError(exc.reason, row=exc.row, line=exc.line, field=exc.field))
    elif isinstance(exc, CgRayError):
        message = str(exc)
    else:
        message = f"internal error ({type(exc).__name__}); the server log has the details under {reference}"
    return scrub_paths(message)[:MAX_CHARS]
