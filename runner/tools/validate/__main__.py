"""``python -m runner.tools.validate``: the ``simllm-validate`` command."""

import sys

from runner.tools.validate.command import main

sys.exit(main())
