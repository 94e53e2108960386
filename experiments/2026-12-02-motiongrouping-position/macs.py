"""Multiply-adds of one forward pass of a pair, 64 px, K = 4: the encoder and the decoder per
slot, for the quick network with 3x3 and with 5x5 decoder kernels and for the official network
(convs and linears)."""
import dataclasses
import torch
from torch import nn
from baselines.motiongrouping import MotionGrouping, profile

torch.set_num_threads(1)


def macs(module, x):
    total = [0]

    def hook(m, inp, out):
        if isinstance(m, nn.Conv2d):
            total[0] += out.numel() * m.in_channels * m.kernel_size[0] * m.kernel_size[1]
        elif isinstance(m, nn.ConvTranspose2d):
            total[0] += inp[0].numel() * m.out_channels * m.kernel_size[0] * m.kernel_size[1]
        elif isinstance(m, nn.Linear):
            total[0] += out.numel() * m.in_features
    hs = [m.register_forward_hook(hook) for m in module.modules()]
    with torch.no_grad():
        module(x)
    for h in hs:
        h.remove()
    return total[0]


for k in (3, 5):
    cfg = dataclasses.replace(profile("quick", "/tmp/x").model, dec_kernel_size=k)
    model = MotionGrouping(cfg)
    enc = macs(model.encoder, torch.zeros(1, 2, 64, 64))
    dec = macs(model.decoder, torch.zeros(1, cfg.slot_size))
    print(f"decoder {k}x{k}: encoder {enc / 1e9:.3f} G, decoder {dec / 1e9:.3f} G a slot, "
          f"pair with K = 4 {(enc + 4 * dec) / 1e9:.3f} G")
cfg = profile("gpu", "/tmp/x").model  # the official network at 64 px
model = MotionGrouping(cfg)
enc = macs(model.encoder, torch.zeros(1, 2, 64, 64))
dec = macs(model.decoder, torch.zeros(1, cfg.slot_size))
print(f"official: encoder {enc / 1e9:.3f} G, decoder {dec / 1e9:.3f} G a slot, pair with K = 4 "
      f"{(enc + 4 * dec) / 1e9:.3f} G")
