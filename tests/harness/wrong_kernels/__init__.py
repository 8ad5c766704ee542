"""Small real wrong kernels, each beside its reference, and their stored outputs (outputs/):
what test_error_shape.py diagnoses. record.py runs them and stores what they return."""
