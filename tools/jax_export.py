"""tools/jax_export.py: what the JAX exporters share (tools/export_*.py import it)."""
import jax


def hlo_text(f, *args):
    """The HLO text of f jitted on args, as lowered for XLA."""
    lo = jax.jit(f).lower(*args)
    try:
        return lo.as_text(dialect="hlo")
    except Exception:
        return lo.compiler_ir("hlo").as_hlo_text()
