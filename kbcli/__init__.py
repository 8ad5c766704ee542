"""`kb`: submit kernels to a kbsite and follow their evaluation, through the REST API."""
