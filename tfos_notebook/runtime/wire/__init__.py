"""The protocols both ends of a run speak: the authenticated control channel (``channel``,
``handshake``, ``tls``), one way to declare a message (``message``, ``checks``) and the control
messages (``messages``: ``reports`` and ``orders``), a node's return value (``values``), the plan
the driver ships (``plan``, ``barrier``), node states and the errors both raise; ``feed/`` is the
data feed's. Imports nothing of ``driver/`` or ``node/``; of the runtime, only ``host/``."""
