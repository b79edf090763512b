"""Loaded first by every Python process of the GPU check (PYTHONPATH): no NVML call may change
the lent GPU. Every pynvml function that sets, resets, clears, creates, destroys or modifies
anything is replaced before any other code imports pynvml.

ZNB_GUARD=shadow  the call is recorded and does nothing; reads of the power limit return the
                  value this process "set", as if it had been applied (runs a tool end to end).
ZNB_GUARD=deny    the call raises NVMLError(NO_PERMISSION), as in a container without SYS_ADMIN.
Every attempted call is appended to $ZNB_GUARD_LOG as one JSON line.
"""

import ctypes
import json
import os
import re
import sys
import time

_WRITE = re.compile(r"^nvml\w*?(Set|Reset|Clear|Create|Destroy|Modify|Remove|Discover)")

try:
    import pynvml as _nv
except Exception:  # noqa: BLE001 - no pynvml: nothing to guard
    _nv = None

if _nv is not None and not getattr(_nv, "_znb_guarded", False):
    _mode = os.environ.get("ZNB_GUARD", "deny")
    _log = os.environ.get("ZNB_GUARD_LOG")
    _limits: dict = {}

    def _key(handle):
        try:
            return ctypes.cast(handle, ctypes.c_void_p).value
        except Exception:  # noqa: BLE001
            return id(handle)

    def _record(name, args):
        if _log:
            with open(_log, "a") as f:
                f.write(
                    json.dumps(
                        {
                            "pid": os.getpid(),
                            "mode": _mode,
                            "call": name,
                            "args": [repr(a) for a in args[1:]],
                            "t": time.time(),
                        }
                    )
                    + "\n"
                )

    def _guarded(name):
        def call(*args, **kwargs):
            _record(name, args)
            if _mode == "shadow":
                if name == "nvmlDeviceSetPowerManagementLimit" and len(args) >= 2:
                    _limits[_key(args[0])] = int(args[1])
                return None
            raise _nv.NVMLError(_nv.NVML_ERROR_NO_PERMISSION)

        call.__name__ = name
        return call

    for _name in list(dir(_nv)):
        if _name.startswith(("nvmlEventSet", "nvmlSystemEventSet")) or "Get" in _name:
            continue  # event sets and reads change nothing
        if _WRITE.match(_name) and callable(getattr(_nv, _name)):
            setattr(_nv, _name, _guarded(_name))

    for _getter in ("nvmlDeviceGetPowerManagementLimit", "nvmlDeviceGetEnforcedPowerLimit"):
        _real = getattr(_nv, _getter, None)
        if _real is not None:

            def _read(handle, _real=_real):
                k = _key(handle)
                return _limits[k] if k in _limits else _real(handle)

            _read.__name__ = _getter
            setattr(_nv, _getter, _read)
    _nv._znb_guarded = True

# Chain to another sitecustomize further down sys.path, if the image has one.
_here = os.path.dirname(os.path.abspath(__file__))
for _p in sys.path:
    _f = os.path.join(_p, "sitecustomize.py")
    if _p and os.path.abspath(_p) != _here and os.path.isfile(_f):
        with open(_f) as _src:
            _code = compile(_src.read(), _f, "exec")
        exec(_code, {"__name__": "sitecustomize_chained", "__file__": _f})
        break
