/* exp2_poly_check.c - the CPU twin of sw_portable::exp2_poly (src/cuda/attn/mma_utils.cuh), checked
 * against exp2f over [-140, 9] in steps of 1e-4: max relative error, -inf and values below -126.
 * gcc -O2 bench/dev/exp2_poly_check.c -lm -o /tmp/exp2_poly_check && /tmp/exp2_poly_check */
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <stdint.h>
static float asf(int32_t i){float f;memcpy(&f,&i,4);return f;}
static int32_t asi(float f){int32_t i;memcpy(&i,&f,4);return i;}
static float exp2_poly(float x){
    x = fmaxf(x, -127.f);
    const float r = x + 12582912.f;
    const float j = r - 12582912.f;
    const float f = x - j;
    float p = fmaf(f, 0.05500893f, 0.24221098f);
    p = fmaf(p, f, 0.69328290f);
    p = fmaf(p, f, 1.f);
    return asf(asi(p) + (int32_t)((uint32_t)asi(r) << 23));
}
int main(void){
    double worst=0; float wx=0; int bad=0;
    for (double x=-140; x<=9; x+=1e-4){
        float xf=(float)x, e=exp2f(xf), g=exp2_poly(xf);
        if (xf < -126) { if (!(g >= 0 && g < 1.2e-38f)) { if (bad++<5) printf("x=%g g=%g\n",xf,g);} continue; }
        double rel=fabs((double)g/e-1); if(rel>worst){worst=rel;wx=xf;}
    }
    printf("max rel err on [-126,9]: %.3g at %g; bad below -126: %d; exp2(-inf)=%g exp2(-127)=%g exp2(0)=%g exp2(8)=%g\n", worst, wx, bad, exp2_poly(-INFINITY), exp2_poly(-127.f), exp2_poly(0.f), exp2_poly(8.f));
    return 0;
}
