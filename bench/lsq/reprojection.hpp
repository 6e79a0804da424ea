// The bundle-adjustment residual of the BAL data sets (Snavely et al., the model in
// Ceres' examples/snavely_reprojection_error.h, written here from its description):
// a camera of 9 parameters (angle-axis rotation, translation, focal length, two radial
// distortion terms) and a point of 3 see the point at a pixel: 2 residuals.
// Written once, generic, for tapeless expressions and for Ceres' jets alike.
#pragma once

template <class T, class Sin, class Cos, class Sqrt>
void reprojection_residuals(const T* camera, const T* point, double observed_x, double observed_y, T* residuals,
                            Sin sin, Cos cos, Sqrt sqrt) {
  // Rotation by the angle-axis vector w (Rodrigues): p' = p cos t + (k x p) sin t + k (k.p)(1 - cos t).
  const T theta2 = camera[0] * camera[0] + camera[1] * camera[1] + camera[2] * camera[2];
  const T theta = sqrt(theta2);
  const T k0 = camera[0] / theta, k1 = camera[1] / theta, k2 = camera[2] / theta;
  const T c = cos(theta), s = sin(theta);
  const T kp = k0 * point[0] + k1 * point[1] + k2 * point[2];
  const T px = point[0] * c + (k1 * point[2] - k2 * point[1]) * s + k0 * kp * (1.0 - c) + camera[3];
  const T py = point[1] * c + (k2 * point[0] - k0 * point[2]) * s + k1 * kp * (1.0 - c) + camera[4];
  const T pz = point[2] * c + (k0 * point[1] - k1 * point[0]) * s + k2 * kp * (1.0 - c) + camera[5];
  const T xp = -px / pz, yp = -py / pz;
  const T r2 = xp * xp + yp * yp;
  const T distortion = 1.0 + r2 * (camera[7] + camera[8] * r2);
  residuals[0] = camera[6] * distortion * xp - observed_x;
  residuals[1] = camera[6] * distortion * yp - observed_y;
}
