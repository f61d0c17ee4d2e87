"""Memory over a training step: the timeline of what is alive when
(:mod:`.timeline`), the caching allocator's model (:mod:`.allocator`), the
reader of CUDA memory snapshots (:mod:`.snapshot`), the optimisations as
strategies and seed 004's quantities.

May import the folders below it: core, models, layout, ledgers, bill.
"""
