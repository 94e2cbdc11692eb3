import sys

from broker_core.tools.mqadmin.cli import main

sys.exit(main())
