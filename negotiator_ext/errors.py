"""The one error type for bad input.

Every problem with what a user gave us (a malformed ad, a non-numeric attribute, a bad
config line, an unknown group, an empty snapshot directory) is raised as an InputError
that names the input. The CLI prints it as one line and exits with status 2; no traceback.
"""

from __future__ import annotations

from .views.text import printable


class InputError(Exception):
    """Bad input, reported as `<source>: [line N: ][ad <ad>: ][attribute <attr>: ]<message>`."""

    def __init__(self, source: str, message: str, *, ad: str | None = None,
                 attribute: str | None = None, line: int | None = None):
        self.source = str(source)
        self.line = line
        self.message = message
        self.ad = ad
        self.attribute = attribute
        super().__init__(self.one_line())

    def __reduce__(self):
        # (pickled to cross from a child process, adapters/beside.py: the default
        # would call __init__ with the one-line text only)
        return _rebuild, (type(self), dict(self.__dict__))

    def one_line(self) -> str:
        """The error in one line for people: a newline in the message becomes a space,
        and every other control character (also any in the source, ad or attribute,
        which can be names from untrusted input) is escaped (`views.text.printable`)."""
        parts = [self.source]
        if self.line is not None:
            parts.append(f"line {self.line}")
        if self.ad:
            parts.append(f"ad {self.ad}")
        if self.attribute:
            parts.append(f"attribute {self.attribute}")
        parts = [printable(str(p)) for p in parts]
        parts.append(printable(str(self.message).replace("\r\n", " ").replace("\n", " ")))
        return ": ".join(parts)


def _rebuild(cls, state: dict) -> InputError:
    exc = cls.__new__(cls)
    exc.__dict__.update(state)
    Exception.__init__(exc, exc.one_line())
    return exc
