"""Documents and names (RUNTIME.md "Launch binding", "Evidence record", "Process keys"):
bytes in, frozen objects out: the launch and its plan, a process's identity and the
binding in its environment, the enrollment messages, the evidence record and its log
format, and who belongs to a launch.

May import: :mod:`ecpa.profile`, :mod:`ecpa.errors`, :mod:`ecpa._files`; no other
sub-room of the runtime.
"""
