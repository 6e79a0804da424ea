// The same source as polyfit.cpp, built by nvcc: adds --device cuda|auto.
#include "polyfit.cpp"
