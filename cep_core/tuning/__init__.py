"""The tuning loop's pure half (seed 002): statistics of the input (arrival rates,
selectivities, costs), the allocation model and the discrete-event simulator that checks
it. Import the modules: :mod:`.statistics`, :mod:`.allocation`, :mod:`.simulator`."""
