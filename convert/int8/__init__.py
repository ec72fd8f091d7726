"""INT8 for edge-convert: calibration (ModelOpt, in a child process), the task-judged INT8 gate, Q/DQ graphs."""
