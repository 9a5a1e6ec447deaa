"""`python -m llmchat`: the same CLI as the `llmchat` script."""
import sys

from .cli import main

sys.exit(main())
