"""The core: abstract values, primitives, the trace stack with the one Tracer, jaxprs and dtype rules."""
