#ifndef WEFT_METRICS_H
#define WEFT_METRICS_H
#endif
