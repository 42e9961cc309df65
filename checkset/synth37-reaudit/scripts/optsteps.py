import rp
def opt_clusters(r, key='/torch/optim'):
    """clusters of consecutive allocations with optimizer frames -> (first, last) event index"""
    T = r.T; cl = []
    last_nonopt_alloc = -1
    for i, e in enumerate(T):
        if e['action'] != 'alloc': continue
        isopt = any(key in f['filename'] for f in e.get('frames', []))
        if isopt:
            if cl and cl[-1][1] > last_nonopt_alloc: cl[-1][1] = i
            else: cl.append([i, i])
        else:
            last_nonopt_alloc = i
    return cl
