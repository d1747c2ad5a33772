"""DLPack's structs in ctypes, for the tests: a producer of either capsule kind over a NumPy
array that counts its deleter's calls, and a consumer that reads a capsule the way a C library
would (checks its name, takes it, reads version and flags, calls the deleter).

Written from the DLPack 1.0 ABI: DLManagedTensorVersioned is {version {major, minor}, manager_ctx,
deleter, flags, dl_tensor}; the unversioned DLManagedTensor is {dl_tensor, manager_ctx, deleter}.
"""
import ctypes

import numpy as np

READ_ONLY = 1 << 0
IS_COPIED = 1 << 1

VERSIONED = b"dltensor_versioned"
VERSIONED_USED = b"used_dltensor_versioned"
LEGACY = b"dltensor"
LEGACY_USED = b"used_dltensor"


class DLDevice(ctypes.Structure):
    _fields_ = [("device_type", ctypes.c_int), ("device_id", ctypes.c_int32)]


class DLDataType(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint8), ("bits", ctypes.c_uint8), ("lanes", ctypes.c_uint16)]


class DLTensor(ctypes.Structure):
    _fields_ = [("data", ctypes.c_void_p), ("device", DLDevice), ("ndim", ctypes.c_int),
                ("dtype", DLDataType), ("shape", ctypes.POINTER(ctypes.c_int64)),
                ("strides", ctypes.POINTER(ctypes.c_int64)), ("byte_offset", ctypes.c_uint64)]


class DLPackVersion(ctypes.Structure):
    _fields_ = [("major", ctypes.c_uint32), ("minor", ctypes.c_uint32)]


class DLManagedTensorVersioned(ctypes.Structure):
    pass


class DLManagedTensor(ctypes.Structure):
    pass


VERSIONED_DELETER = ctypes.CFUNCTYPE(None, ctypes.POINTER(DLManagedTensorVersioned))
LEGACY_DELETER = ctypes.CFUNCTYPE(None, ctypes.POINTER(DLManagedTensor))
DLManagedTensorVersioned._fields_ = [("version", DLPackVersion), ("manager_ctx", ctypes.c_void_p),
                                     ("deleter", VERSIONED_DELETER), ("flags", ctypes.c_uint64),
                                     ("dl_tensor", DLTensor)]
DLManagedTensor._fields_ = [("dl_tensor", DLTensor), ("manager_ctx", ctypes.c_void_p),
                            ("deleter", LEGACY_DELETER)]

# The capsule API, on raw pointers where a capsule is being destroyed (no reference taken).
_api = ctypes.pythonapi
_CAPSULE_DESTRUCTOR = ctypes.CFUNCTYPE(None, ctypes.c_void_p)
_new = ctypes.PYFUNCTYPE(ctypes.py_object, ctypes.c_void_p, ctypes.c_char_p,
                         _CAPSULE_DESTRUCTOR)(("PyCapsule_New", _api))
_is_valid_raw = ctypes.PYFUNCTYPE(ctypes.c_int, ctypes.c_void_p,
                                  ctypes.c_char_p)(("PyCapsule_IsValid", _api))
_pointer_raw = ctypes.PYFUNCTYPE(ctypes.c_void_p, ctypes.c_void_p,
                                 ctypes.c_char_p)(("PyCapsule_GetPointer", _api))
_name = ctypes.PYFUNCTYPE(ctypes.c_char_p, ctypes.py_object)(("PyCapsule_GetName", _api))
_pointer = ctypes.PYFUNCTYPE(ctypes.c_void_p, ctypes.py_object,
                             ctypes.c_char_p)(("PyCapsule_GetPointer", _api))
_set_name = ctypes.PYFUNCTYPE(ctypes.c_int, ctypes.py_object,
                              ctypes.c_char_p)(("PyCapsule_SetName", _api))


@_CAPSULE_DESTRUCTOR
def _free_untaken(capsule):
    # A capsule still under its unused name was never taken: its tensor is freed here.
    if _is_valid_raw(capsule, VERSIONED):
        m = ctypes.cast(_pointer_raw(capsule, VERSIONED), ctypes.POINTER(DLManagedTensorVersioned))
        m.contents.deleter(m)
    elif _is_valid_raw(capsule, LEGACY):
        m = ctypes.cast(_pointer_raw(capsule, LEGACY), ctypes.POINTER(DLManagedTensor))
        m.contents.deleter(m)


_DTYPES = {np.dtype(np.float32): (2, 32), np.dtype(np.float16): (2, 16),
           np.dtype(np.int32): (0, 32), np.dtype(np.int8): (0, 8), np.dtype(np.int64): (0, 64)}


class Producer:
    """A CPU tensor over `array` that speaks DLPack 1.0 (or, with legacy_only, only the old
    signature). `calls` holds the keywords of each __dlpack__ call; `deleted` counts deleter
    calls; `read_only` sets DLPack's READ_ONLY flag; `version` is the version it writes."""

    def __init__(self, array, read_only=False, legacy_only=False, version=(1, 0)):
        self.array = np.ascontiguousarray(array)
        self.read_only, self.legacy_only, self.version = read_only, legacy_only, version
        self.calls, self.deleted, self._alive = [], 0, []
        if legacy_only:
            self.__dlpack__ = self._legacy_dlpack

    def __dlpack_device__(self):
        return (1, 0)

    def _legacy_dlpack(self, stream=None):
        self.calls.append({"stream": stream})
        return self._capsule(versioned=False)

    def __dlpack__(self, *, stream=None, max_version=None, dl_device=None, copy=None):
        self.calls.append({"stream": stream, "max_version": max_version, "dl_device": dl_device,
                           "copy": copy})
        return self._capsule(versioned=max_version is not None and max_version[0] >= 1)

    def _tensor(self, t):
        a = self.array
        code, bits = _DTYPES[a.dtype]
        shape = (ctypes.c_int64 * a.ndim)(*a.shape)
        t.data = a.ctypes.data
        t.device = DLDevice(1, 0)
        t.ndim = a.ndim
        t.dtype = DLDataType(code, bits, 1)
        t.shape = shape
        t.strides = None
        t.byte_offset = 0
        return shape

    def _capsule(self, versioned):
        if versioned:
            m = DLManagedTensorVersioned()
            m.version = DLPackVersion(*self.version)
            m.flags = READ_ONLY if self.read_only else 0
            deleter = VERSIONED_DELETER(self._delete)
            name = VERSIONED
        else:
            m = DLManagedTensor()
            deleter = LEGACY_DELETER(self._delete)
            name = LEGACY
        shape = self._tensor(m.dl_tensor)
        m.deleter = deleter
        self._alive.append((m, shape, deleter))  # as long as the producer
        return _new(ctypes.addressof(m), name, _free_untaken)

    def _delete(self, m):
        self.deleted += 1


def name(capsule):
    return _name(capsule)


class Taken:
    """A capsule taken as a C consumer takes it: renamed "used_...", its version, flags and
    tensor read; free() calls the producer's deleter."""

    def __init__(self, capsule):
        self.capsule_name = _name(capsule)
        self.versioned = self.capsule_name == VERSIONED
        if self.versioned:
            self.m = ctypes.cast(_pointer(capsule, VERSIONED),
                                 ctypes.POINTER(DLManagedTensorVersioned))
            _set_name(capsule, VERSIONED_USED)
            self.version = (self.m.contents.version.major, self.m.contents.version.minor)
            self.flags = self.m.contents.flags
        else:
            assert self.capsule_name == LEGACY, self.capsule_name
            self.m = ctypes.cast(_pointer(capsule, LEGACY), ctypes.POINTER(DLManagedTensor))
            _set_name(capsule, LEGACY_USED)
            self.version, self.flags = None, None
        t = self.m.contents.dl_tensor
        self.device = (t.device.device_type, t.device.device_id)
        self.data = t.data + t.byte_offset
        self.shape = tuple(t.shape[i] for i in range(t.ndim))

    def free(self):
        self.m.contents.deleter(self.m)
