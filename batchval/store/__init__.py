"""The run's memory, below both the sending (run/) and the writing (output/): run/ writes
it, output/ reads it, neither imports the other."""
