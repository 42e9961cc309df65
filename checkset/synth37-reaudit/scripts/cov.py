import rp, pools, sys
def cov(stem, dev, npu, end):
    d = rp.load(stem); r = rp.R(d, dev); T = r.T
    res = pools.track(r, npu=npu)
    n = c = 0
    for (i, ssz, free, small) in res:
        if i >= end: continue
        # request = next alloc
        j = i+1
        while j < len(T) and T[j]['action'] != 'alloc': j += 1
        req = rp.rnd(T[j]['size'], npu)
        n += 1; c += free >= req
    print(stem, 'segallocs', n, 'covered by request size', c)
cov('m03', 0, False, 4621); cov('m02', 5, True, 123415)
