"""One module per CLI command: ``HELP``, ``add_arguments(parser)``, ``run(args)``.

The top of the pipeline: may import every folder.
"""
