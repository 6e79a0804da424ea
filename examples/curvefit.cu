// The same source as curvefit.cpp, built by nvcc: fits on the GPU when one is usable.
#include "curvefit.cpp"
