"""duet's errors as Python exceptions.

Every exception duet raises is a :class:`duet.Error` carrying duet's one-sentence message (it
names the op, the tensor, the device and what was expected) and ``kind``, the name of duet's
error code. The classes also derive from the built-in exception a Python user would catch:
bad input is a ``ValueError``, a name that is not there a ``LookupError``, running out of memory
a ``MemoryError``.
"""


class Error(Exception):
    """Base of duet's exceptions: ``message`` is duet's sentence, ``kind`` its error code."""

    kind = "internal"

    def __init__(self, message, kind=None):
        super().__init__(message)
        self.message = message
        if kind is not None:
            self.kind = kind


class BadInputError(Error, ValueError):
    """The caller gave something malformed: a dtype, a shape, an attribute, a policy."""

    kind = "invalid_argument"


class ParseError(BadInputError):
    """A file's (or a text's) content is malformed."""

    kind = "parse_error"


class NotFoundError(BadInputError, LookupError):
    """An unknown input, device, op, tensor or file."""

    kind = "not_found"


class EngineClosedError(BadInputError):
    """The engine was closed (Engine.close(), or the end of its ``with`` block)."""


class UnsupportedError(Error):
    """Well-formed, but this device, backend or build cannot do it (the reason is named)."""

    kind = "unsupported"


class DLPackError(UnsupportedError, BufferError):
    """``__dlpack__`` cannot export the tensor as asked: to another device, with a copy duet does
    not make, or without one where one is needed (``copy=False``). A ``BufferError``, as the
    Python array API standard names it."""


class OutOfMemoryError(Error, MemoryError):
    """A device's (or the host's) memory ran out."""

    kind = "out_of_memory"


class FileError(Error):
    """Reading or writing a file failed."""

    kind = "io_error"


class DeviceLostError(Error):
    """A device failed in a way that poisons later work on it."""

    kind = "device_lost"


class InternalError(Error):
    """A bug in duet."""

    kind = "internal"


_BY_KIND = {
    "invalid_argument": BadInputError,
    "parse_error": ParseError,
    "not_found": NotFoundError,
    "unsupported": UnsupportedError,
    "out_of_memory": OutOfMemoryError,
    "io_error": FileError,
    "device_lost": DeviceLostError,
    "internal": InternalError,
}


def error_class(kind):
    """The exception class of a duet error code's name."""
    return _BY_KIND.get(kind, Error)
