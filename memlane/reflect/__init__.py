"""CARA reflect: disposition-aware answers, opinions with confidence, observations and
background merging (memlane/reflect/service.py ties them to an engine)."""

from memlane.reflect.service import ReflectRequest, ReflectResult, ReflectService

__all__ = ["ReflectService", "ReflectRequest", "ReflectResult"]
