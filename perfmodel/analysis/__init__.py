"""Questions asked of the model: speculative decoding, sweeps, sizing, claims, validation, calibration, endpoints. Built on perfmodel.api."""
