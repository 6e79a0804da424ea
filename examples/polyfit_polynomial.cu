// The same source as polyfit_polynomial.cpp, built by nvcc.
#include "polyfit_polynomial.cpp"
