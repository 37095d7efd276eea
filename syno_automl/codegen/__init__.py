"""Code generators that turn a kernel-IR program (docs/architecture.md §2) into executable code.

Submodules are imported explicitly (``from syno_automl.codegen.torch import build_module``); nothing here
imports the native core.
"""
