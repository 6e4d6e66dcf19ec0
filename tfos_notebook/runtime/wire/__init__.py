"""What both ends of a run share: the authenticated control channel (``channel``) and its typed
messages (``messages``, ``checks``), the errors both raise, bounded waits (``timeouts``), process
groups (``procs``), tailing files (``filetail``), and the host scans both ends make (``orphans``,
``gpus``). Imports nothing of ``driver/`` or ``node/``."""
