"""How a command says that it stops or warns: a headline in a colour, then the detail.

The detail is an exception's message, a path or a spec's text, and those hold
brackets: a name's pattern ``'^[a-z][a-z0-9]{0,7}$'``, the window ``[warmup,
duration]``, a folder called ``runs[old]``. Interpolated into Rich markup, such
text is read as tags: dropped from the message, or a ``MarkupError`` raised in its
place (``[/...]``). A :class:`rich.text.Text` is never parsed as markup, so
everything here builds one.
"""

from __future__ import annotations

from typing import NoReturn

import typer
from rich.console import Console
from rich.text import Text


def alert(headline: object, detail: object | None = None, *, sep: str = "\n",
          style: str = "red") -> Text:
    """``headline`` in ``style``, then ``sep`` and ``detail``, both taken literally."""
    text = Text()
    text.append(str(headline), style=style)  # a span: Text(..., style=) would colour it all
    if detail is not None:
        text.append(f"{sep}{detail}")
    return text


def refuse(console: Console, headline: object, detail: object | None = None, *, code: int,
           sep: str = "\n") -> NoReturn:
    """Print :func:`alert` (headline in red) on ``console`` and exit with ``code``.

    The convention of the command line: 2 for input that is wrong (a spec, a file,
    an argument), 1 for a refusal by the machine's state (a lab in the way, a
    missing feature, a command that failed). Called in an ``except`` block, the
    exit does not chain the exception: its message is what the user needed.
    """
    console.print(alert(headline, detail, sep=sep), highlight=False)
    raise typer.Exit(code) from None
