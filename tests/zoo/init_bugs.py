"""Planted bugs in parameter initialisation: each overrides `init_parameter`."""
import torch

from _base import GRU, LSTM, RNN, LSTMCell


class InitBoundOneOverH(RNN):
    def init_parameter(self, name, parameter):
        parameter.uniform_(-1.0 / self.hidden_size, 1.0 / self.hidden_size)


class InitRandn(LSTM):
    def init_parameter(self, name, parameter):
        parameter.normal_()


class InitZeroBiases(GRU):
    def init_parameter(self, name, parameter):
        super().init_parameter(name, parameter)
        if name.startswith("bias"):
            parameter.zero_()


class InitOrthogonalWhh(RNN):
    def init_parameter(self, name, parameter):
        super().init_parameter(name, parameter)
        if name.startswith("weight_hh"):
            torch.nn.init.orthogonal_(parameter)


class InitForgetBiasOne(LSTMCell):
    def init_parameter(self, name, parameter):
        super().init_parameter(name, parameter)
        if name.startswith("bias_ih"):
            parameter[self.hidden_size:2 * self.hidden_size] = 1.0  # TF/Keras "unit forget bias"


class InitProjectionBound(LSTM):
    def init_parameter(self, name, parameter):
        super().init_parameter(name, parameter)
        if name.startswith("weight_hr"):
            bound = self.proj_size ** -0.5  # fan-in of the next step, not torch's 1/sqrt(H)
            parameter.uniform_(-bound, bound)
