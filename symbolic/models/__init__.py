"""What a model is: its configuration (:mod:`.config`), the readers of HF
``config.json`` files (:mod:`.hf`), the built-in models (:mod:`.builtin`) and
the inventories of each architecture (:mod:`.architectures`).

May import ``symbolic.core`` only.
"""
