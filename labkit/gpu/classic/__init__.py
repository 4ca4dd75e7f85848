"""The classic (legacy) cuDNN API, beside the frontend graphs: `cudnn_library` finds, loads and
binds cuDNN 9's ``libcudnn.so`` through ctypes, and `legacy` reads the classic API's
convolution-forward algorithm table through it (each algorithm's workspace and, on request, its
time: lesson 01's "algorithm -> workspace -> time"). Nothing here runs a convolution for its result.
"""
