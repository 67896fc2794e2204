"""Built-in batch-advisor adapters (import name ``advisor_adapters``).

They register through the ``batch_advisor.adapters`` entry-point group, the
same way a third-party plugin does.
"""
