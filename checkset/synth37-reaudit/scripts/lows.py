import rp, sys
def count_lows(A, thr):
    # zigzag: count valleys separated by rise>=thr and fall>=thr
    lows=[]; state='down'; cur_min=A[0]; cur_min_i=0; cur_max=A[0]
    for i,x in enumerate(A):
        if state=='down':
            if x < cur_min: cur_min, cur_min_i = x, i
            if x - cur_min >= thr: lows.append((cur_min_i, cur_min)); state='up'; cur_max=x
        else:
            if x > cur_max: cur_max = x
            if cur_max - x >= thr: state='down'; cur_min, cur_min_i = x, i
    if state=='down': lows.append((cur_min_i, cur_min))
    return lows
if __name__=='__main__':
    stem, dev, thr = sys.argv[1], int(sys.argv[2]), float(sys.argv[3])
    d=rp.load(stem); r=rp.R(d,dev)
    L=count_lows(r.A, thr*2**20)
    print(len(L), L[0][0], L[-1][0], rp.g(min(x for i,x in L)), rp.g(max(x for i,x in L)), rp.m(max(x for i,x in L)-min(x for i,x in L)))
