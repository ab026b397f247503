# nets: shipped network files
