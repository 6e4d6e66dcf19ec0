"""InputMode.SPARK on the driver: the run's feed facade (``api``), the feeder that runs Spark jobs
over the data (``feeder``), dealing data into the gang's own barrier stage (``instage``), and the
summaries users read (``data``)."""
