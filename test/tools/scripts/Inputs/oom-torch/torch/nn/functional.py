"""Nothing of it is reached before the model goes to the GPU."""
