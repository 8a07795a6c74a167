import os, sys, time
sys.path.insert(0, os.path.join(os.getcwd(), "python"))
mode = sys.argv[1]
if mode == "vram":
    import vram_torch
    vram_torch.enable()
import torch
torch.backends.cudnn.benchmark = True
m = torch.nn.Sequential(torch.nn.Conv2d(3, 64, 7, 2, 3), torch.nn.ReLU(), torch.nn.Conv2d(64, 128, 3, 1, 1)).cuda()
x = torch.randn(32, 3, 224, 224, device="cuda")
try:
    for i in range(3):
        y = m(x).square().mean()
        y.backward()
    torch.cuda.synchronize()
    print(mode, "cudnn.benchmark conv fwd+bwd OK", float(y))
except Exception as e:
    print(mode, "FAILED:", type(e).__name__, str(e)[:300])
