import rp
def steps_from_ann(d, r, prefix='ProfilerStep#'):
    ann = [a for a in d.get('external_annotations', []) if a['name'].startswith(prefix) and a['stage']=='START' and a['device']==r.dev]
    ts = [a['time_us'] for a in ann]
    T = r.T; idx = []
    j = 0
    bounds = []
    for t in ts:
        while j < len(T) and T[j]['time_us'] < t: j += 1
        bounds.append(j)
    bounds.append(len(T))
    return bounds
def lows_highs(r, bounds):
    out = []
    for k in range(len(bounds)-1):
        a, b = bounds[k], bounds[k+1]
        if a >= b: out.append(None); continue
        seg = r.A[a:b]
        lo = min(seg); hi = max(seg)
        out.append((a, b, lo, hi, a + seg.index(hi)))
    return out
